"""The tasks folder as a database: spec files in, status sidecars out, atomic writes, change
scans by file events and full listings of the folder."""
