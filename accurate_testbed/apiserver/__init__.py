"""An in-memory kube-apiserver for the tests and the demo (DESIGN.md section 8)."""
