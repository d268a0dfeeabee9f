"""Layer 1, hosts: where commands run.

A local subprocess or SSH with fabric behind one ``Host`` interface; the inventory that names hosts;
processes, TLS material and network checks on them; the lab of SSH hosts in network namespaces.
"""
