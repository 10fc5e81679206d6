"""A package, so that its test modules do not clash with another chapter's."""
