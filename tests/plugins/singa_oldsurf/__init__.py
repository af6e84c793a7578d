"""A backend written against the plugin surface before ``singa.backend`` was the only one."""
