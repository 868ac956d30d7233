"""The S3 gate protocol and S3's access model, as the gate applies them to S3 and every
S3-compatible store (R2, backend packages):

- ``protocol``: S3GateProtocol, the hooks the gate calls; ``actions``: a request as an IAM
  action; ``decide``: the decision; ``bookkeeping`` and ``mirror``: the access configuration
  mirrored from the real API calls, the gate's own Get* answers; ``listing``: ListBuckets
  filtered before it is paginated; ``upstream``: the gate's own key for what it forwards.
- ``signatures`` (SigV4, SigV2, presigned) and ``post`` (POST-policy uploads): who signed.
- ``acl``, ``policy`` (with ``conditions``: IAM wildcards, condition operators and keys),
  ``access``, ``cors``: the access model itself, pure (ACLs, bucket policies, Object
  Ownership and Block Public Access, CORS rules).
- ``features``: only the mechanisms the store declares (harness.gate.access_features):
  the others' calls get the store's error, new buckets have only what the store has.
"""
