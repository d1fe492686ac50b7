"""A library that finds its format plugins on first use, as Pillow's ``Image.open`` does.

``load(data)`` imports the plugins inside the call (``from . import ...``, an optional one that
does not exist skipped on ImportError) and asks each whether the data is its format."""

_PLUGINS: list = []


def _init() -> None:
    if _PLUGINS:
        return
    for name in ("boxplugin", "absentplugin", "strictplugin", "tagplugin"):
        try:
            module = __import__(f"{__name__}.{name}", fromlist=["accept"])
        except ImportError:
            continue  # an optional plugin that is not installed
        _PLUGINS.append(module)
    from . import tagplugin  # noqa: F401 - the other way a library imports one


class FormatError(ValueError):
    pass


def load(data: bytes) -> str:
    _init()
    for plugin in _PLUGINS:
        if plugin.accept(data[:4]):
            return plugin.read(data)
    raise FormatError("unknown format")
