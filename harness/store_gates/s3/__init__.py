"""The S3 gate protocol and S3's access model, as the gate applies them to S3 and every
S3-compatible store (R2, store packages). The five roles of every gate package
(docs/backends.md, "A gate package's layout"):

- ``requests``: a request as an IAM action and S3 operation (two route tables);
- ``access``: the access model's decisions, pure (with ``acl``, ``policy`` and
  ``conditions``, ``features``: ACLs, bucket policies, Object Ownership, Block Public
  Access, only the mechanisms the store declares);
- ``signatures``: who signed (SigV4, SigV2, presigned; ``keys``: the access keys; ``post``:
  POST-policy uploads);
- ``bookkeeping``: what the gate keeps from successful calls (with ``mirror``: the access
  configuration in the gate state; ``listing``: ListBuckets filtered before it is paginated);
- ``protocol``: S3GateProtocol, the hooks the gate calls, wiring them (with ``answers``: what
  the gate answers itself and its errors; ``upstream``: the gate's own key for what it
  forwards).
"""
