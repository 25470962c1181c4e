"""A Kubernetes cluster as hosts: the API behind a seam (api.py) and a pod as a Host (pod.py)."""
