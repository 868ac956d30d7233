"""The Azure Blob gate protocol: ``protocol`` (container public access levels learned from
the real calls, the gate's hooks) and ``signatures`` (Shared Key and SAS verification)."""
