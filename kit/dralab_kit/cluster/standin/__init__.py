"""The kubelet stand-in: the DRA part of a kubelet for one KWOK node (plugin discovery, prepare, unprepare)."""
