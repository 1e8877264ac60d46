"""Everything that talks to Ray: the real adapter, the fake one, and a private local head."""
