"""The metrics over the event tables: what rows each reads and what it adds up, as Ibis expressions
(which the build computes, and /explain lists the rows of), and each as one standalone SQL query."""
