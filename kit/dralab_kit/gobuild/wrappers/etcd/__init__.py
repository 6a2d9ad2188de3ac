"""Go wrapper module: see go.mod."""
