//! Launchers: how agents are started on the hosts of an inventory.
