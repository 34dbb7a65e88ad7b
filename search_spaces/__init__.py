"""Search spaces: each turns its architectures into ONNX and gives each one a canonical id.

Use :func:`get_space` to build one by name and :func:`register_space` (or the entry-point group
``nasrlm.search_spaces``) to add your own; :mod:`search_spaces.testing` checks that it conforms.
"""

from search_spaces._base import SearchSpace
from search_spaces._registry import (
    ENTRY_POINT_GROUP,
    UnknownSpaceError,
    available_spaces,
    get_space,
    register_space,
)
from search_spaces._subset import SubsetSpace
from search_spaces._torch_space import TorchSearchSpace
from search_spaces.anynet import ANYNET_SPACES, AnyNetArch, AnyNetSpace
from search_spaces.fbnet import FBNet, FBNetArch
from search_spaces.nasbench101 import NasBench101, NB101Cell
from search_spaces.nasbench201 import NasBench201, NB201Arch
from search_spaces.nds import NB301, NDS_CELL_SPACES, CellArch, NDSCellSpace
from search_spaces.ofa import (
    OFAMBv3Arch,
    OFAMobileNetV3,
    OFAProxylessArch,
    OFAProxylessNAS,
    OFAResNet50,
    OFAResNet50Arch,
)

register_space("nb101", NasBench101)
register_space("nb201", NasBench201)
register_space("fbnet", FBNet)
register_space("ofa_mbv3", OFAMobileNetV3)
register_space("ofa_proxyless", OFAProxylessNAS)
register_space("ofa_resnet50", OFAResNet50)
register_space("nb301", NB301)
for _name, _cls in {**NDS_CELL_SPACES, **ANYNET_SPACES}.items():  # CIFAR-10 and ImageNet (``_in``) each
    register_space(_name, _cls)

__all__ = [
    "ENTRY_POINT_GROUP",
    "AnyNetArch",
    "AnyNetSpace",
    "CellArch",
    "FBNet",
    "FBNetArch",
    "NB101Cell",
    "NB201Arch",
    "NB301",
    "NDSCellSpace",
    "NasBench101",
    "NasBench201",
    "OFAMBv3Arch",
    "OFAMobileNetV3",
    "OFAProxylessArch",
    "OFAProxylessNAS",
    "OFAResNet50",
    "OFAResNet50Arch",
    "SearchSpace",
    "SubsetSpace",
    "TorchSearchSpace",
    "UnknownSpaceError",
    "available_spaces",
    "get_space",
    "register_space",
]
