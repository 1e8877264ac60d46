"""Who may do what: bearer tokens, their roles and folders, what a token may put in a spec, and
which local paths a spec's runtimeEnv may name."""
