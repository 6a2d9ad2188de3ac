"""The DRA node driver: publishes accelerators as shareable devices and prepares claims through CDI."""
