"""Tool dispatch as one pipeline of middleware (see `base`), and the middleware itself."""
