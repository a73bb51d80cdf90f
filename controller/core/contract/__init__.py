"""The module contract v1alpha1: the three roles, the inputs the controller computes for a
role module, the root that calls it, and the outputs read back from that root. Pure: it
imports only the basics and the spec, and touches no file, process or API."""
