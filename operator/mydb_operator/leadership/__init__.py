"""Leader election on a coordination.k8s.io Lease: of several instances, exactly one reconciles.

The leader renews the Lease every duration/3. A standby takes the Lease once it
has not been renewed for a whole duration. A leader that cannot renew in time
exits at once (its Deployment restarts it as a standby), so two leaders never
overlap by more than the clock skew between them.

A Lease only keeps apart the instances that name the same Lease. So each Lease
also carries the scope its holder manages (all namespaces, or its -n list),
and an instance refuses to start while another live Lease, held by someone
else, guards a scope that overlaps its own: two installs of the chart, or a
local run beside the in-cluster Deployment, must not both act on one database.
"""
