"""A package, so that its test_bad_input.py does not clash with another chapter's."""
