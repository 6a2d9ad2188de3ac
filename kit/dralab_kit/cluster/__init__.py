"""The local Kubernetes 1.35 cluster: real control-plane binaries built from Go modules, KWOK nodes,
and a kubelet stand-in that calls DRA drivers."""
