"""The one way out of libaccurate to the network: the Kubernetes API adapter and what it needs.

Everything else in libaccurate is pure rules over plain dicts. This package holds the client the
plugin and the controller share (``kube``), the kubeconfig it reads (``kubeconfig``, with the
plain YAML reader ``plain_yaml``), the HTTP/1.1 connection it speaks over (``http_connection``,
which also inflates gzip bodies), the proxy kubectl would go through (``proxies``) and the
tunnels through it (``tunnels``): whatever transport feature comes next lands here too. It also
holds how a process that keeps the API's answers sets Python's garbage collector
(``collector``), which both shells use: the one other piece of process state they share.
"""
