"""Protocol buffers of the kubelet plugin APIs, generated from the ``.proto`` files in this package.

Import the modules directly: ``from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc``.
``pluginregistration_pb2`` (+ ``_grpc``): plugin registration; ``dra_v1_pb2`` and ``dra_v1beta1_pb2``
(+ ``_grpc``): the DRA node service. Regenerate with ``python -m dralab.driver.proto.generate``.
"""

# gRPC service names the registration advertises, preferred first (the kubelet takes the first it knows).
DRA_V1_SERVICE = "v1.DRAPlugin"
DRA_V1BETA1_SERVICE = "v1beta1.DRAPlugin"
SUPPORTED_VERSIONS = (DRA_V1_SERVICE, DRA_V1BETA1_SERVICE)
