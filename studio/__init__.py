"""The composition root: :class:`studio.workspace.Workspace` builds every store, client and builder."""
