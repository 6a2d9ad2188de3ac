"""Go wrapper modules (go.mod + go.sum per folder), shipped as package data."""
