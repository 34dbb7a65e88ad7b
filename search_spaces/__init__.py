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
from search_spaces._torch_space import TorchSearchSpace
from search_spaces.fbnet import FBNet, FBNetArch
from search_spaces.nasbench101 import NasBench101, NB101Cell
from search_spaces.nasbench201 import NasBench201, NB201Arch

register_space("nb101", NasBench101)
register_space("nb201", NasBench201)
register_space("fbnet", FBNet)

__all__ = [
    "ENTRY_POINT_GROUP",
    "FBNet",
    "FBNetArch",
    "NB101Cell",
    "NB201Arch",
    "NasBench101",
    "NasBench201",
    "SearchSpace",
    "TorchSearchSpace",
    "UnknownSpaceError",
    "available_spaces",
    "get_space",
    "register_space",
]
