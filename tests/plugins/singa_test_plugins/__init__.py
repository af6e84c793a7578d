"""Small plugins for the plugin-loader tests; each misbehaves in one specific way."""
