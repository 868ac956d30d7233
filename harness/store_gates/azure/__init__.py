"""The Azure Blob gate protocol, in the roles of every gate package (docs/backends.md, "A
gate package's layout"): ``requests`` (a request as a Blob REST operation: one table),
``access`` (container public access levels; pure), ``signatures`` (Shared Key and SAS
verification), ``bookkeeping`` (storage accounts, containers' owners and levels learnt from
the real calls, blob writes), ``protocol`` (the gate's hooks)."""
