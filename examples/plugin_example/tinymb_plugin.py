"""Registers the ``tinymb`` space, so that ``nasrlm --plugin tinymb_plugin.py ...`` can use it by name.

Kept apart from ``tiny_mobilenet.py`` on purpose: the conformance tests import the space class without
registering it (see ``search_spaces/README.md``). Installed packages use an entry point instead of a file
like this one.
"""

from tiny_mobilenet import TinyMobileNet

from search_spaces import register_space

register_space(TinyMobileNet.name, TinyMobileNet)
