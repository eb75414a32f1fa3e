"""Host side of the LOB simulator: parameters, layouts, ``LobSim``, fills log, scripted driver."""
