"""The lab replay harness: a pytest plugin that deploys dralab onto a cluster profile and replays labs."""
