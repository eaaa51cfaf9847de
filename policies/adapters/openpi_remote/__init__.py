"""openpi_remote: pi0 / pi0.5 served by an openpi policy server, queried with openpi-client."""
