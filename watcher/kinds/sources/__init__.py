"""The sources several kinds ride (``votes``, ``accounts``, the decoded-powers sources) and the
getVoteAccounts answer shared by every source reading it in one tick."""
