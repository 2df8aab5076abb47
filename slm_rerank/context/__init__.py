"""Context for agents around the citations: stubs, architectural groups, uncommitted work."""
