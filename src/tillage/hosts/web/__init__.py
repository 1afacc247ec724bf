"""Mission Control: `till ui`'s page on 127.0.0.1, a host of the verb registry."""
