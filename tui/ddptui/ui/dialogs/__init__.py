"""Modal dialogs, one a module, each typed by the answer it dismisses with."""
