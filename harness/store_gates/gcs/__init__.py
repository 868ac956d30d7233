"""The GCS gate protocol and GCS's access model, in the roles of every gate package
(docs/backends.md, "A gate package's layout"): ``requests`` (a request as a GCS permission:
two tables), ``access`` (IAM bindings, uniform bucket-level access, public access
prevention, object ACLs; pure), ``signatures`` (bearer tokens, signed URLs; with
``signed_urls``: V4 signing, RSA and HMAC), ``bookkeeping`` (what the gate records),
``protocol`` (the gate's hooks; with ``answers``: IAM policies and object ACLs the gate
answers itself, its errors)."""
