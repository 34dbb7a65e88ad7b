"""``--plugin`` and ``$NASRLM_PLUGINS``: modules or ``.py`` files imported before a command runs."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from nasrlm.cli._common import CliError


def load_plugins(plugins: Sequence[str]) -> None:
    """Import each plug-in so that its ``register_space`` calls run: spaces without an installed package.

    A plug-in is a module name (found on ``sys.path``) or the path of a ``.py`` file. A file is imported
    under its stem, with its folder put first on ``sys.path`` as when Python runs a script, so it can
    import modules beside it. Each is imported once per process, however often it is named.
    """
    for plugin in dict.fromkeys(p.strip() for p in plugins if p.strip()):
        if plugin.endswith(".py") or os.sep in plugin or (os.altsep and os.altsep in plugin):
            _import_file(Path(plugin))
            continue
        try:
            importlib.import_module(plugin)
        except ModuleNotFoundError as error:
            if error.name != plugin.split(".")[0] and error.name != plugin:
                raise _plugin_failed(plugin, error, None) from None  # it failed to import something
            raise CliError(f"plug-in module {plugin!r} not found on the Python path; pass the file instead "
                           f"(--plugin path/to/{plugin.rsplit('.', 1)[-1]}.py)") from None
        except Exception as error:
            raise _plugin_failed(plugin, error, None) from None


def _import_file(path: Path) -> None:
    if not path.is_file():
        raise CliError(f"plug-in file {str(path)!r} not found")
    path = path.resolve()
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if getattr(loaded, "__file__", None) and Path(loaded.__file__).resolve() == path:
            return
        raise CliError(f"plug-in {str(path)!r}: a module named {name!r} is already imported "
                       f"(from {getattr(loaded, '__file__', 'built-in')}); rename the file")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        del sys.modules[name]
        if isinstance(error, Exception):
            raise _plugin_failed(str(path), error, path) from None
        raise


def _plugin_failed(plugin: str, error: Exception, path: Path | None) -> CliError:
    """One line for a plug-in whose import raised ``error``: where (file and line) and what.

    The place is the syntax error's, else the innermost frame in the plug-in's folder (``path``'s, or
    anywhere outside Python's import machinery for a module), else the innermost frame.
    """
    if isinstance(error, SyntaxError):
        where = f"{error.filename}:{error.lineno}"
        what = f"SyntaxError: {error.msg}"
    else:
        import traceback

        def is_own(filename: str) -> bool:
            if path is not None:
                return Path(filename).resolve().is_relative_to(path.parent)
            return "importlib" not in filename and filename != __file__

        frames = traceback.extract_tb(error.__traceback__)
        frame = ([f for f in frames if is_own(f.filename)] or frames)[-1]
        where = f"{frame.filename}:{frame.lineno}"
        what = f"{type(error).__name__}: {error}"
    return CliError(f"plug-in {plugin!r} failed to import: {where}: {what}")
