"""The message toolkit: canonical form, tool-call pairing, shortening, validation."""
