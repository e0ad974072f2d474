"""Small real applications, one per framework, run against the real servers by the tests."""
