"""YAML in and out: spec, status and queue files read into records with errors that name the
file, field, line and column; dumps in the usual field order; merge patches that keep comments."""
