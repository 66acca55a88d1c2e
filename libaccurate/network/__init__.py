"""The one way out of libaccurate to the network: the Kubernetes API adapter and what it needs.

Everything else in libaccurate is pure rules over plain dicts. This package holds the client the
plugin and the controller share (``kube``), the kubeconfig it reads (``kubeconfig``, with the
plain YAML reader ``plain_yaml``) and the HTTP/1.1 connection it speaks over
(``http_connection``), so that compression, proxies and whatever transport feature comes next
land in one place.
"""
