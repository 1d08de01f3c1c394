"""Per reproduction, one synthetic result on which each claim is reproduced and one on which it
is not (``EXAMPLES: {claim id: (passing data, failing data)}``), for ``test_claims_can_fail``.

A module is named after its reproduction (``load-shift`` → ``load_shift.py``); the data is
whatever that reproduction's claim ``measure`` functions take, built small with
:func:`claim_examples.synth.frame`."""
