"""`accurate-controller`: keeps the cluster as libaccurate plans it; serves webhooks."""
