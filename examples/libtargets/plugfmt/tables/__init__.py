"""Tables a plugin imports on first use; importing its own submodule by absolute name while it
is still initializing (as ``pygments.styles`` does)."""
from plugfmt.tables._versions import NEXT

__all__ = ["NEXT"]
