"""The GCS gate protocol and GCS's access model: ``protocol`` (the gate's hooks),
``requests`` (a request as a GCS permission), ``access`` (IAM bindings, uniform bucket-level
access, public access prevention, object ACLs; pure) and ``signed_urls`` (V4 signed URLs,
RSA and HMAC)."""
