"""What kinds reuse without being one: account layouts, alert samples, the names of the
/metrics values, the paging of signatures, amounts and wording helpers; pure but for the
balance and owner reads (``balance_reads``, ``owners``)."""
