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
from search_spaces.anynet import AnyNetArch, AnyNetSpace, NDSResNet, NDSResNeXtA, NDSResNeXtB, NDSVanilla
from search_spaces.fbnet import FBNet, FBNetArch
from search_spaces.nasbench101 import NasBench101, NB101Cell
from search_spaces.nasbench201 import NasBench201, NB201Arch
from search_spaces.nds import NB301, NDSDARTS, NDSENAS, NDSPNAS, CellArch, NDSAmoeba, NDSCellSpace, NDSNASNet
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
register_space("nds_amoeba", NDSAmoeba)
register_space("nds_darts", NDSDARTS)
register_space("nds_enas", NDSENAS)
register_space("nds_nasnet", NDSNASNet)
register_space("nds_pnas", NDSPNAS)
register_space("nds_resnet", NDSResNet)
register_space("nds_resnext-a", NDSResNeXtA)
register_space("nds_resnext-b", NDSResNeXtB)
register_space("nds_vanilla", NDSVanilla)

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
