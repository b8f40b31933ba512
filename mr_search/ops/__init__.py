"""GPU-run operations: the launcher's start-up decisions and the tooling of GPU runs."""
