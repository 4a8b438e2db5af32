"""Shipping weights from a learner to what acts with them: one interface
(`base.WeightSender`) with its transports: this process (`local`), actor processes
through shared memory (`shared`), Ray actors through the object store (`ray`), and
replicas that average (`averaging`)."""
