"""Study 3: what each synchronous_commit level costs a primary with a synchronous standby."""

STUDY = "synchronous_commit"
